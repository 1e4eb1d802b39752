"""preprocess operators."""
