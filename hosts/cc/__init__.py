"""Congestion controllers (Reno, CUBIC, DCQCN), each with the optional MLTCP augmentation."""
