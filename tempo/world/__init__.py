"""The world a dispatcher serves: routing (:mod:`.workloads`), EPLB placement
(:mod:`.placement`), routing traces on disk (:mod:`.traces`), public recordings of trained MoE
routing converted to traces (:mod:`.recorded`), named routing profiles (:mod:`.profiles`), the
skew scale that places a profile beside Zipf routing (:mod:`.skew`) and request datasets
(:mod:`.datasets`)."""
