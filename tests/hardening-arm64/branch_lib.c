/* Built three times: -mbranch-protection=standard | bti | none. */
int bulwark_branch_probe(int x) { return x + 1; }
