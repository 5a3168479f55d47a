"""Output constraints: what a reply must look like (JSON, a JSON schema, a GBNF grammar)."""
