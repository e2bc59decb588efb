// Compresses a buffer with DeflateStream for the seconds given (tests/dotnet-r2r-frames.sh).
using System;
using System.Diagnostics;
using System.IO;
using System.IO.Compression;

static class Program
{
    static int Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0]) : 3;
        var data = new byte[1 << 20];
        var rng = new Random(1);
        for (int i = 0; i < data.Length; i++)
        {
            data[i] = (byte)(rng.Next(16) + (i % 7));
        }
        long total = 0;
        var clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            using var output = new MemoryStream();
            using (var deflate = new DeflateStream(output, CompressionLevel.Optimal, leaveOpen: true))
            {
                deflate.Write(data, 0, data.Length);
            }
            total += output.Length;
        }
        Console.WriteLine("compress: " + (total > 0 ? "ran" : "empty"));
        return 0;
    }
}
