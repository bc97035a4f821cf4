"""Paper Section 3 and Appendix A as code: the PARTITION reduction (Theorem 1), the additive
bound and round-robin certificate (Lemmas, Theorem 2) and the flip boundary B* (Section 3.2)."""
