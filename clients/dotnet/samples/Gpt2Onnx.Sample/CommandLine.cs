// A small command-line reader: one positional EXPORT_FOLDER, flags with a value (repeatable), switches.
using System.Globalization;

namespace Gpt2Onnx.Sample;

/// <summary>A bad command line: one line for stderr, exit 2.</summary>
public sealed class UsageException(string message) : Exception(message);

/// <summary>The parsed arguments of one command.</summary>
public sealed class CommandLine
{
    private readonly Dictionary<string, List<string>> _values = [];
    private readonly HashSet<string> _switches = [];

    private CommandLine(string folder) => Folder = folder;

    /// <summary>The export folder.</summary>
    public string Folder { get; }

    /// <summary>Reads <paramref name="args"/>: <paramref name="flags"/> take a value, <paramref name="switches"/> none.</summary>
    public static CommandLine Parse(string[] args, IReadOnlyCollection<string> flags, IReadOnlyCollection<string> switches)
    {
        string? folder = null;
        var values = new List<(string, string)>();
        var on = new List<string>();
        for (int i = 0; i < args.Length; i++)
        {
            string a = args[i];
            if (flags.Contains(a))
            {
                values.Add((a, i + 1 < args.Length ? args[++i] : throw new UsageException($"{a} needs a value")));
            }
            else if (switches.Contains(a))
            {
                on.Add(a);
            }
            else if (!a.StartsWith('-') && folder is null)
            {
                folder = a;
            }
            else
            {
                throw new UsageException(a.StartsWith('-') ? $"unknown option '{a}'" : $"unexpected argument '{a}'");
            }
        }
        var line = new CommandLine(folder ?? throw new UsageException("no export folder given"));
        foreach ((string flag, string value) in values)
        {
            (line._values.TryGetValue(flag, out List<string>? list) ? list : line._values[flag] = []).Add(value);
        }
        line._switches.UnionWith(on);
        return line;
    }

    /// <summary>Whether a switch was given.</summary>
    public bool Has(string name) => _switches.Contains(name) || _values.ContainsKey(name);

    /// <summary>A flag's last value, or null.</summary>
    public string? Text(string name) => _values.TryGetValue(name, out List<string>? v) ? v[^1] : null;

    /// <summary>Every value of a repeatable flag.</summary>
    public IReadOnlyList<string> All(string name) => _values.TryGetValue(name, out List<string>? v) ? v : [];

    /// <summary>A flag's value as an integer, or null.</summary>
    public long? WholeNumber(string name) => Text(name) is not { } text ? null
        : long.TryParse(text, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out long n) ? n
        : throw new UsageException($"{name} takes an integer, not '{text}'");

    /// <summary>A flag's value as a number, or null.</summary>
    public double? Number(string name) => Text(name) is not { } text ? null
        : double.TryParse(text, NumberStyles.Float, CultureInfo.InvariantCulture, out double x) && double.IsFinite(x) ? x
        : throw new UsageException($"{name} takes a number, not '{text}'");
}
