"""postprocess operators."""
