package bench
func cleanupBinary() {}
