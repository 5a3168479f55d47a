"""Long jobs (make a quantization, compare two models) in an engine process of their own, so the chat's
engine stays free and a job that cannot be interrupted can be killed."""
