// The packed Gpt2Onnx package used as a customer uses it: open a folder, generate greedily, print the new ids.
// Usage: PackageConsumer EXPORT_FOLDER PROMPT MAX_NEW_TOKENS
using Gpt2Onnx;

using Gpt2Model model = Gpt2Model.Open(args[0]);
GenerationResult result = model.Generate(args[1], new GenerationOptions { MaxNewTokens = int.Parse(args[2]) });
Console.WriteLine(string.Join(' ', result.Ids));
