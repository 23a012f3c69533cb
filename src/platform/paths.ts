import fs from 'node:fs';
import path from 'node:path';

/** The project root (the folder of package.json), whether running from src/ or from dist/src/. */
export const projectRoot: string = (() => {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`package.json not found above ${__dirname}`);
    dir = parent;
  }
  return dir;
})();
