"""The ladder's database: the LadderStore facade, its table groups, the schema, the backends."""
