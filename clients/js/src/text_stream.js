// Incremental detokenization: the text each new token adds. GPT-2's byte-level BPE can split one character over
// several tokens; a decoded tail ending in U+FFFD (an incomplete UTF-8 sequence) is held back until it completes.

export class TextStream {
  /** @param {import('@huggingface/tokenizers').Tokenizer} tokenizer */
  constructor(tokenizer) {
    this.tokenizer = tokenizer;
    /** @type {number[]} */
    this.ids = [];
    this.emitted = '';
  }

  /** @param {number} id @returns {string} the new text, possibly '' */
  push(id) {
    this.ids.push(id);
    const text = this.full();
    if (text.endsWith('\uFFFD') || !text.startsWith(this.emitted)) return '';
    const delta = text.slice(this.emitted.length);
    this.emitted = text;
    return delta;
  }

  /** The whole text so far (special tokens skipped). */
  full() {
    return this.tokenizer.decode(this.ids, { skip_special_tokens: true });
  }
}
