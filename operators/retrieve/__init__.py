"""retrieve operators."""
