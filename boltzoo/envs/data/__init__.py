"""Task data for the environments: seeded generators and loaders for public formats."""
