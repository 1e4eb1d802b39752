"""analyze operators."""
