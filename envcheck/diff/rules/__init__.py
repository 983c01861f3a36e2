"""The rule families (one module each) and the catalog they register into."""
