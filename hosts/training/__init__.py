"""PyTorch data-parallel training over the mlfc transport."""
