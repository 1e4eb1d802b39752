"""query operators: more queries from each query (expansions, sub-questions, keywords), searched beside it."""
