print("lbs-bench: not built yet")
