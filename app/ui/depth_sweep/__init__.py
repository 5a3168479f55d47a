"""Speed against context length: the "Speed vs context" window, its run and its place in the window."""
