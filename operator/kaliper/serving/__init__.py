"""Kaliper's built-in model server: ONNX Runtime behind the Open Inference Protocol v2 (REST)."""
