"""The task environments (math-v0, and next sql-v0 and rag-v0), their base, tools and data."""
