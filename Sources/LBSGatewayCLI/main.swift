print("lbs-gateway: not built yet")
