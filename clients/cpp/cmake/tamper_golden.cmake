# Copy golden.json (IN) to OUT with the first expected greedy token of case 0 changed, so that a correct export
# must fail the check against it.  cmake -DIN=golden.json -DOUT=tampered.json -P tamper_golden.cmake
file(READ "${IN}" golden)
string(JSON token GET "${golden}" cases 0 greedy_ids 0)
if(token EQUAL 0)
  set(token 1)
else()
  math(EXPR token "${token} - 1")
endif()
string(JSON golden SET "${golden}" cases 0 greedy_ids 0 "${token}")
file(WRITE "${OUT}" "${golden}")
