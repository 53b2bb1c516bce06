"""Training on several processes: ranks, the process group, checkpoint parts, sharded state, the interconnect."""
