"""The world a dispatcher serves: routing (:mod:`.workloads`), EPLB placement
(:mod:`.placement`), routing traces on disk (:mod:`.traces`) and request datasets
(:mod:`.datasets`)."""
