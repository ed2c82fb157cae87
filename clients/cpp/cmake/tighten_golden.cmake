# Copy golden.json (IN) to OUT with case 0's own logits_atol set far below any float32 result's rounding, so that
# a check which applies each case's limit (not only the file's) must fail that case's logit comparisons.
#   cmake -DIN=golden.json -DOUT=tight.json -P tighten_golden.cmake
file(READ "${IN}" golden)
string(JSON golden SET "${golden}" cases 0 logits_atol "1e-12")
file(WRITE "${OUT}" "${golden}")
