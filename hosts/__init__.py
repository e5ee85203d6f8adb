"""Host side: the tagged gradient transport with MLTCP congestion control, and the training agent."""
