"""The MLTCP experiments: kernel TCP (``kernel``, ``kernel_net``) and the regime curve every platform's rows
feed (``regime``)."""
