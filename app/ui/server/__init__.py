"""The local API in the window: the server's controller (engine bridge, request log) and its panel."""
