"""sources operators."""
