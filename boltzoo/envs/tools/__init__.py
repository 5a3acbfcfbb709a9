"""Tools that environments run on behalf of agents: calculator, SQL sandbox, retrieval."""
