print("consciousness-sim: not built yet")
