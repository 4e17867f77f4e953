// The repository's Dockerfile as the linter reads it: dockerfile-ast, the parser dockerfile-utils
// lints with, split into stages. For the tests that hold the Dockerfile to package.json and the docs
// (e2e/dockerfile.test.ts) and the Kubernetes manifests to the image (kubernetes/kubernetes-manifests).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DockerfileParser, type Instruction as AstInstruction } from 'dockerfile-ast';

export const DOCKERFILE = fileURLToPath(new URL('../../../Dockerfile', import.meta.url));

export interface Instruction {
  keyword: string;
  /** The arguments as written, continuation lines joined, without the flags. */
  args: string;
  /** `--name=value` flags (COPY --from, HEALTHCHECK --interval…) by name. */
  flags: Record<string, string>;
  /** 1-based, for messages. */
  line: number;
}

export interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** The Dockerfile's stages, in order; an instruction belongs to the FROM above it. */
export function readDockerfile(path = DOCKERFILE): Stage[] {
  const stages: Stage[] = [];
  for (const i of DockerfileParser.parse(readFileSync(path, 'utf8')).getInstructions()) {
    const instruction = toInstruction(i);
    if (instruction.keyword === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      stages.push({ from: m?.[1] ?? '', name: m?.[2], instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

function toInstruction(i: AstInstruction): Instruction {
  const flags: Record<string, string> = {};
  // Only the instructions that take flags have getFlags (COPY, ADD, FROM, HEALTHCHECK, RUN).
  const withFlags = i as AstInstruction & { getFlags?: () => { getName(): string; getValue(): string | null }[] };
  for (const f of withFlags.getFlags?.() ?? []) flags[f.getName()] = f.getValue() ?? '';
  return {
    keyword: i.getKeyword().toUpperCase(),
    args: i.getArgumentsContent() ?? '',
    flags,
    line: i.getRange().start.line + 1,
  };
}

export const all = (stage: Stage, keyword: string): Instruction[] => stage.instructions.filter((i) => i.keyword === keyword);

export function one(stage: Stage, keyword: string): Instruction {
  const found = all(stage, keyword);
  if (found.length !== 1) throw new Error(`expected exactly one ${keyword} in the stage FROM ${stage.from}, found ${found.length}`);
  return found[0]!;
}

/** An exec-form argument list (`["node", "x"]`), or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) throw new Error(`not a JSON list of strings: ${args}`);
  return parsed as string[];
}

/** The HEALTHCHECK's exec-form command (after `CMD`), or undefined. */
export function healthcheckCommand(stage: Stage): string[] | undefined {
  const args = one(stage, 'HEALTHCHECK').args;
  return args.startsWith('CMD ') ? execForm(args.slice(4)) : undefined;
}

/** ENV KEY=value pairs of a stage. */
export function envOf(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of all(stage, 'ENV')) for (const m of i.args.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env[m[1]!] = m[2]!.replace(/^"|"$/g, '');
  return env;
}
