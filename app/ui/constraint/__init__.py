"""The chat's output format in the window (issue 23 §1): the "Output format" dialog, the chip under the
composer, and the feature that wires them to the chat's settings."""
