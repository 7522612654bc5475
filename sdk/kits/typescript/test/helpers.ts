// What the kit's tests share: the real cellarena (its Python, from CELLARENA_PYTHON), servers on free
// ports, folders for their output, and throwaway TLS certificates.

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/** The Python that has cellarena installed: the test suite sets CELLARENA_PYTHON to its own. */
export const PYTHON = process.env.CELLARENA_PYTHON || "python3";
export const CELLARENA = [PYTHON, "-m", "cellarena.arena.cli"];
/** The compiled test bots. */
export const BOTS = path.resolve(__dirname, "bots");
/** Seconds any one server or bot may take in these tests before it counts as hung. */
export const PROCESS_TIMEOUT_MS = 120000;

/** The folders `tempDir` made in this test file's process, removed when it exits. */
const made: string[] = [];
process.on("exit", () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A folder of its own under the system's temporary folder, gone when the test file's process ends. */
export function tempDir(label: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `cellarena-kit-${label}-`));
  made.push(dir);
  return dir;
}

/** Environment without CELLARENA_* (a bot must get its settings from flags or its launcher). */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("CELLARENA_")) env[k] = v;
  return { ...env, ...extra };
}

export interface Done {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, within PROCESS_TIMEOUT_MS. */
export function runCommand(command: string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<Done> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0], command.slice(1), { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${command.join(" ")} did not end in ${PROCESS_TIMEOUT_MS / 1000} s:\n${stderr}`));
    }, PROCESS_TIMEOUT_MS);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface Server {
  port: number;
  child: ChildProcess;
  stderr: () => string;
  stop: () => Promise<void>;
}

/** `cellarena ARGS` (a serve command with --port 0) once it says where it listens. */
export function startServer(args: string[]): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(CELLARENA[0], [...CELLARENA.slice(1), ...args], { env: cleanEnv(), stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    let found = false;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`cellarena ${args.join(" ")} did not start:\n${stderr}`));
    }, PROCESS_TIMEOUT_MS);
    const stop = (): Promise<void> =>
      new Promise((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done();
        const kill = setTimeout(() => child.kill("SIGKILL"), 15000);
        child.once("exit", () => {
          clearTimeout(kill);
          done();
        });
        child.kill("SIGTERM");
      });
    child.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
      const m = /on 127\.0\.0\.1:(\d+)/.exec(stderr);
      if (m && !found) {
        found = true;
        clearTimeout(timer);
        resolve({ port: Number(m[1]), child, stderr: () => stderr, stop });
      }
    });
    child.on("exit", () => {
      if (!found) {
        clearTimeout(timer);
        reject(new Error(`cellarena ${args.join(" ")} exited before listening:\n${stderr}`));
      }
    });
  });
}

/** A CA file, and a certificate and key for 127.0.0.1 and localhost signed by it (trustme, a test
 * dependency of cellarena). */
export function certificates(folder: string): { ca: string; cert: string; key: string } {
  const script =
    "import sys, trustme\n" +
    "ca = trustme.CA(); cert = ca.issue_cert('127.0.0.1', 'localhost'); d = sys.argv[1]\n" +
    "ca.cert_pem.write_to_path(d + '/ca.pem'); cert.private_key_pem.write_to_path(d + '/key.pem')\n" +
    "open(d + '/chain.pem', 'wb').write(b''.join(b.bytes() for b in cert.cert_chain_pems))\n";
  const made = spawnSync(PYTHON, ["-c", script, folder], { encoding: "utf8" });
  if (made.status !== 0) throw new Error(`cannot make test certificates with trustme: ${made.stderr}`);
  return { ca: path.join(folder, "ca.pem"), cert: path.join(folder, "chain.pem"), key: path.join(folder, "key.pem") };
}

/** The REPORT lines a test bot wrote to its log, by what they report. */
export function reports(log: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const line of fs.readFileSync(log, "utf8").split("\n")) {
    const m = /^REPORT (\w+) (.*)$/.exec(line);
    if (m) out[m[1]] = JSON.parse(m[2]);
  }
  return out;
}
