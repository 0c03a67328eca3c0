#!/usr/bin/python3
"""A conversation with textgen-server's Chat RPC from Python, streamed as it is generated.

Needs only Debian's packages (python3-grpcio, python3-protobuf, protobuf-compiler,
protobuf-compiler-grpc) and Python modules generated from the proto (docs/api-grpc.md, Python):

  protoc -I proto --python_out=OUT --grpc_python_out=OUT \
      --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin proto/textgen/v1/textgen.proto
  PYTHONPATH=OUT /usr/bin/python3 client/python/chat_example.py "Tell me a story." "Who is in it?"

Each argument is one user turn of the same conversation. By default the server keeps it in a
session (each turn sends only the new message and reuses the earlier turns' KV cache);
--no-session sends the whole conversation every turn instead.
"""
import argparse
import sys

import grpc
from textgen.v1 import textgen_pb2, textgen_pb2_grpc


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("turns", nargs="+", help="user messages, one per turn")
    p.add_argument("--server", default="127.0.0.1:50051")
    p.add_argument("--system", default="", help="a system message opening the conversation")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="> 0 samples (default greedy)")
    p.add_argument("--seed", type=int)
    p.add_argument("--no-session", action="store_true")
    args = p.parse_args()

    stub = textgen_pb2_grpc.TextGenerationStub(grpc.insecure_channel(args.server))
    session_id = ""
    if not args.no_session:
        session_id = stub.CreateSession(textgen_pb2.CreateSessionRequest()).session_id

    history = []  # the whole conversation, for --no-session
    pending = [textgen_pb2.ChatMessage(role="system", content=args.system)] if args.system else []
    try:
        for turn in args.turns:
            pending.append(textgen_pb2.ChatMessage(role="user", content=turn))
            messages = history + pending if args.no_session else pending
            request = textgen_pb2.ChatRequest(
                messages=messages, session_id=session_id, max_new_tokens=args.max_new_tokens)
            # Unset fields stay unset: the server picks the method from those that are set.
            if args.temperature > 0:
                request.temperature = args.temperature
            if args.seed is not None:
                request.seed = args.seed
            answer = []
            for response in stub.Chat(request):
                sys.stdout.write(response.text)
                sys.stdout.flush()
                answer.append(response.text)
                if response.HasField("usage"):
                    u = response.usage
                    print(f"\n[{u.prompt_tokens} prompt tokens ({u.cached_tokens} cached), "
                          f"{u.generated_tokens} generated, "
                          f"{textgen_pb2.FinishReason.Name(response.finish_reason)}]",
                          file=sys.stderr)
            sys.stdout.write("\n")
            history += pending + [textgen_pb2.ChatMessage(role="assistant",
                                                          content="".join(answer))]
            pending = []
    except grpc.RpcError as e:
        print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
        return 1
    finally:
        if session_id:
            stub.DeleteSession(textgen_pb2.DeleteSessionRequest(session_id=session_id))
    return 0


if __name__ == "__main__":
    sys.exit(main())
