// tests/dotnet/alltypes: an EventSource with every field type EventPipe carries. Run with
// DOTNET_EnableEventPipe=1 and DOTNET_EventPipeConfig=Pipeprof-Test-AllTypes:...: the runtime
// writes the events into a nettrace file, and this program writes what it emitted, as JSON
// (argv[0]), so that tests/dotnet-alltypes.sh can check pipeprof reads back exactly that.
using System;
using System.Collections.Generic;
using System.Diagnostics.Tracing;
using System.Globalization;
using System.IO;
using System.Text;

public enum Color { Red = 1, Green = 2, Blue = 0x7fffffff }

[EventSource(Name = "Pipeprof-Test-AllTypes")]
public sealed class AllTypesSource : EventSource
{
    public static readonly AllTypesSource Log = new AllTypesSource();

    public static class Keywords
    {
        public const EventKeywords Numbers = (EventKeywords)0x1;
        public const EventKeywords Reals = (EventKeywords)0x2;
    }

    [Event(1, Level = EventLevel.Informational, Keywords = Keywords.Numbers)]
    public void Integers(sbyte i8, byte u8, short i16, ushort u16, int i32, uint u32, long i64,
                         ulong u64) =>
        WriteEvent(1, i8, u8, i16, u16, i32, u32, i64, u64);

    [Event(2, Level = EventLevel.Verbose, Keywords = Keywords.Reals)]
    public void Floats(float f32, double f64, bool yes, bool no, char letter) =>
        WriteEvent(2, f32, f64, yes, no, letter);

    [Event(3, Level = EventLevel.Warning)]
    public void Texts(string empty, string ascii, string unicode, Guid id, DateTime when) =>
        WriteEvent(3, empty, ascii, unicode, id, when);

    [Event(4)]
    public void Bytes(byte[] bytes, int after) => WriteEvent(4, bytes, after);

    [Event(5)]
    public void Enumerated(Color color) => WriteEvent(5, color);

    [Event(6)]
    public void NoFields() => WriteEvent(6);

    [Event(7, Opcode = EventOpcode.Start)]
    public void WorkStart(int workId) => WriteEvent(7, workId);

    [Event(8, Opcode = EventOpcode.Stop)]
    public void WorkStop(int workId) => WriteEvent(8, workId);
}

// Arrays and nested objects: EventSource supports them in its self-describing (TraceLogging)
// form, whose metadata EventPipe carries as V2Params.
public sealed class SelfDescribingSource : EventSource
{
    public static readonly SelfDescribingSource Log = new SelfDescribingSource();

    SelfDescribingSource() : base("Pipeprof-Test-SelfDescribing", EventSourceSettings.EtwSelfDescribingEventFormat) { }
}

public static class Program
{
    static readonly List<string> Emitted = new List<string>();

    static string J(object v)
    {
        switch (v)
        {
            case null: return "null";
            case bool b: return b ? "true" : "false";
            case string s: return JString(s);
            case char c: return JString(c.ToString());
            case Guid g: return JString(g.ToString("D"));
            case DateTime d: return d.ToFileTimeUtc().ToString(CultureInfo.InvariantCulture);
            case float f: return f.ToString("R", CultureInfo.InvariantCulture);
            case double d: return d.ToString("R", CultureInfo.InvariantCulture);
            case Color e: return ((int)e).ToString(CultureInfo.InvariantCulture);
            case byte[] a: return "[" + string.Join(",", a) + "]";
            case Array a:
                var parts = new List<string>();
                foreach (var x in a) parts.Add(J(x));
                return "[" + string.Join(",", parts) + "]";
            default: return Convert.ToString(v, CultureInfo.InvariantCulture);
        }
    }

    static string JString(string s)
    {
        var sb = new StringBuilder("\"");
        foreach (var c in s)
        {
            if (c == '"' || c == '\\') sb.Append('\\').Append(c);
            else if (c < 0x20) sb.Append("\\u").Append(((int)c).ToString("x4"));
            else sb.Append(c);
        }
        return sb.Append('"').ToString();
    }

    static void Note(string name, params (string, object)[] fields)
    {
        var parts = new List<string>();
        foreach (var (k, v) in fields) parts.Add(JString(k) + ":" + J(v));
        Emitted.Add("{\"name\":" + JString(name) + ",\"fields\":{" + string.Join(",", parts) + "}}");
    }

    public static int Main(string[] args)
    {
        if (args.Length != 1) { Console.Error.WriteLine("usage: alltypes EXPECTED.json"); return 2; }
        var log = AllTypesSource.Log;
        if (!log.IsEnabled()) { Console.Error.WriteLine("the EventSource is not enabled"); return 1; }

        log.Integers(sbyte.MinValue, byte.MaxValue, short.MinValue, ushort.MaxValue, int.MinValue,
                     uint.MaxValue, long.MinValue, ulong.MaxValue);
        Note("Integers", ("i8", sbyte.MinValue), ("u8", byte.MaxValue), ("i16", short.MinValue),
             ("u16", ushort.MaxValue), ("i32", int.MinValue), ("u32", uint.MaxValue),
             ("i64", long.MinValue), ("u64", ulong.MaxValue));
        log.Integers(-1, 0, 12345, 1, 42, 7, 1L << 53, 1UL << 63);
        Note("Integers", ("i8", (sbyte)-1), ("u8", (byte)0), ("i16", (short)12345), ("u16", (ushort)1),
             ("i32", 42), ("u32", 7u), ("i64", 1L << 53), ("u64", 1UL << 63));

        log.Floats(3.14159274f, Math.E, true, false, 'Ω');
        Note("Floats", ("f32", 3.14159274f), ("f64", Math.E), ("yes", true), ("no", false), ("letter", 'Ω'));
        log.Floats(float.Epsilon, -1e300, true, false, 'a');
        Note("Floats", ("f32", float.Epsilon), ("f64", -1e300), ("yes", true), ("no", false), ("letter", 'a'));

        var id = new Guid("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
        var when = new DateTime(2026, 11, 22, 10, 30, 45, 123, DateTimeKind.Utc);
        log.Texts("", "plain ascii", "caf\u00e9 \u20ac \U0001F600 \u4e2d\u6587", id, when);
        Note("Texts", ("empty", ""), ("ascii", "plain ascii"), ("unicode", "caf\u00e9 \u20ac \U0001F600 \u4e2d\u6587"),
             ("id", id), ("when", when));

        var bytes = new byte[] { 0, 1, 127, 128, 255 };
        log.Bytes(bytes, 77);
        Note("Bytes", ("bytes", bytes), ("after", 77));
        log.Bytes(new byte[0], -77);
        Note("Bytes", ("bytes", new byte[0]), ("after", -77));

        var sd = SelfDescribingSource.Log;
        if (!sd.IsEnabled()) { Console.Error.WriteLine("the self-describing EventSource is not enabled"); return 1; }
        var ints = new[] { 1, -2, int.MaxValue, int.MinValue };
        var longs = new[] { long.MaxValue, 0L, -5L };
        var doubles = new[] { 0.5, -1.25, 1e-10 };
        var options = new EventSourceOptions { Level = EventLevel.Informational };
        sd.Write("Arrays", options, new { ints = ints, longs = longs, doubles = doubles });
        Note("Arrays", ("ints", ints), ("longs", longs), ("doubles", doubles));
        sd.Write("Nested", options, new { id = 5, inner = new { x = 1.5, name = "in" }, tail = "t" });
        Emitted.Add("{\"name\":\"Nested\",\"fields\":{\"id\":5,\"inner\":{\"x\":1.5,\"name\":\"in\"},\"tail\":\"t\"}}");

        log.Enumerated(Color.Blue);
        Note("Enumerated", ("color", Color.Blue));
        log.NoFields();
        Note("NoFields");
        log.WorkStart(99);
        Note("WorkStart", ("workId", 99));
        log.WorkStop(99);
        Note("WorkStop", ("workId", 99));

        File.WriteAllText(args[0], "[\n" + string.Join(",\n", Emitted) + "\n]\n");
        return 0;
    }
}
