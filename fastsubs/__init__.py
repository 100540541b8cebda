"""fastsubs."""
