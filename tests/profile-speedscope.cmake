# The speedscope and chromium writers (profile/fmt-speedscope.c, fmt-chromium.c): a unit test and
# their consumers (speedscope's schema and importer in headless Chromium, the Trace Event rules).
pp_add_test(test-profile-speedscope LIBS pp_profile)
pp_add_script_test(profile-consumers-speedscope profile-consumers-speedscope.sh LABELS integration
  TIMEOUT 400)
