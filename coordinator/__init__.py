"""The coordinator: ranks jobs by Maximum-Accuracy-Improvement-First and sends priorities to the controller."""
