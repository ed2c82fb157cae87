#!/usr/bin/env node
// gpt2-onnx-js run FOLDER --prompt TEXT ... | serve-page FOLDER ... (src/cli/main.js; --help shows the usage)
import { main, report } from '../src/cli/main.js';

main(process.argv.slice(2)).catch((error) => {
  const { status, line } = report(error);
  console.error(line);
  process.exit(status);
});
