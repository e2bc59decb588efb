# Interop with the real .NET runtime as the reference writer (skips loudly without dotnet).
pp_add_script_test(dotnet-alltypes dotnet-alltypes.sh LABELS integration TIMEOUT 400)
