"""``rimo-eval view``: a static, offline transcript browser over one or more runs."""
