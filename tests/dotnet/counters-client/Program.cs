// tests/dotnet/counters-client PID SECONDS OUT.json: opens the session dotnet-counters opens
// (System.Runtime at Informational with EventCounterIntervalSec=1, plus pipeprof's counters),
// reads the EventCounters events live with TraceEvent as dotnet-counters does (the payload's
// "Payload" dictionary), and after SECONDS stops the session and writes every counter value it
// saw: [{"provider", "name", "type", "value", "units", "interval", "t"}].
using System;
using System.Collections.Generic;
using System.Diagnostics.Tracing;
using System.Globalization;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Microsoft.Diagnostics.NETCore.Client;
using Microsoft.Diagnostics.Tracing;

public static class Program
{
    public static int Main(string[] args)
    {
        int pid = int.Parse(args[0], CultureInfo.InvariantCulture);
        double seconds = double.Parse(args[1], CultureInfo.InvariantCulture);
        var args1 = new Dictionary<string, string> { ["EventCounterIntervalSec"] = "1" };
        var providers = new List<EventPipeProvider> {
            new EventPipeProvider("System.Runtime", EventLevel.Informational, -1, args1),
            new EventPipeProvider("pipeprof", EventLevel.Informational, 0, args1),
        };
        var client = new DiagnosticsClient(pid);
        var rows = new List<string>();
        var start = DateTime.UtcNow;
        // The rows' "t" counts from here: a caller lines its own clock up with it.
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "counters-client: start {0:F3}",
            (start - DateTime.UnixEpoch).TotalSeconds));
        using (EventPipeSession session = client.StartEventPipeSession(providers, false, 10))
        {
            var source = new EventPipeEventSource(session.EventStream);
            source.Dynamic.All += e =>
            {
                if (e.EventName != "EventCounters") return;
                var outer = (IDictionary<string, object>)e.PayloadValue(0);
                var p = (IDictionary<string, object>)outer["Payload"];
                string type = p["CounterType"].ToString();
                double value = Convert.ToDouble(type == "Sum" ? p["Increment"] : p["Mean"], CultureInfo.InvariantCulture);
                lock (rows)
                {
                    rows.Add(string.Format(CultureInfo.InvariantCulture,
                        "{{\"provider\":\"{0}\",\"name\":\"{1}\",\"type\":\"{2}\",\"value\":{3:R},\"units\":\"{4}\",\"interval\":{5:R},\"t\":{6:R}}}",
                        e.ProviderName, p["Name"], type, value, p["DisplayUnits"],
                        Convert.ToDouble(p["IntervalSec"], CultureInfo.InvariantCulture),
                        (e.TimeStamp.ToUniversalTime() - start).TotalSeconds));
                }
            };
            var reader = Task.Run(() => source.Process());
            Thread.Sleep(TimeSpan.FromSeconds(seconds));
            session.Stop();
            reader.Wait(TimeSpan.FromSeconds(30));
        }
        lock (rows)
        {
            File.WriteAllText(args[2], "[" + string.Join(",\n", rows) + "]\n", new UTF8Encoding(false));
            Console.WriteLine("counters-client: " + rows.Count + " counter values");
        }
        return 0;
    }
}
