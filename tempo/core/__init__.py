"""The spine every other layer speaks (DESIGN.md, "Core types"): one layer of one batch and its
dispatch (:mod:`.instance`), the per-GPU cost of Eq. 1/2/4 (:mod:`.cost`) and its named parameter
sets (:mod:`.params`, paper Tables 6 and 7), model shapes (:mod:`.models`), the topology split of
Section 4.3 (:mod:`.topology`) and where data lives (:mod:`.paths`).  Imports nothing above it."""
