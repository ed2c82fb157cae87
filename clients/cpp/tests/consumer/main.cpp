// A customer's program: open an export folder, generate from token ids, and from text where the library has it.
#include <gpt2_onnx/gpt2_onnx.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer EXPORT_FOLDER\n";
    return 2;
  }
  try {
    gpt2_onnx::Model model = gpt2_onnx::Model::open(argv[1]);
    const gpt2_onnx::Generation by_ids = model.generate(std::vector<int64_t>{464, 1441, 1988, 286, 262, 2163, 318});
    std::cout << "ids:";
    for (const int64_t id : by_ids.ids) std::cout << " " << id;
    std::cout << "\n";
#if GPT2_ONNX_WITH_TEXT
    const gpt2_onnx::Generation by_text = model.generate(std::string_view("The return value of the function is"));
    std::cout << "text: [" << by_text.text << "]\n";
#endif
    return 0;
  } catch (const gpt2_onnx::Error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
