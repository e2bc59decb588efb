# The agent's HTTP pull endpoints in a real host (bridge/http-source.c, http/).
if(TARGET pp_http)
  pp_add_script_test(http-agent http-agent.sh LABELS integration TIMEOUT 240)
  # Final samples and samples of several intervals in an HTTP CPU recording.
  pp_add_script_test(http-final-samples http-final-samples.sh LABELS integration TIMEOUT 120)
  # Frames named by the library mapped at each sample's time (one unloaded, another at its place).
  pp_add_script_test(http-module-reuse http-module-reuse.sh LABELS integration TIMEOUT 120)
endif()
