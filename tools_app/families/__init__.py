"""Every tool family of the host, one module or package each."""
