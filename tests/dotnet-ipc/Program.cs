// Runs for N seconds (default 5), burning a little CPU, then prints "dotnet-ipc done".
// [N [--until FILE]]: with --until the run ends as soon as FILE exists, N seconds at most (a test
// that must find the app still running after steps whose length a loaded machine decides).
var seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 5.0;
var until = args.Length > 2 && args[1] == "--until" ? args[2] : null;
var sw = System.Diagnostics.Stopwatch.StartNew();
ulong x = 1;
while (sw.Elapsed.TotalSeconds < seconds && (until == null || !File.Exists(until)))
{
    for (var i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    Thread.Sleep(1);
}
Console.WriteLine(x == 0 ? "zero" : "dotnet-ipc done");
