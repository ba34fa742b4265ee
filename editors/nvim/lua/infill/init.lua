-- infill for Neovim (0.7 or later): starts infill-lsp for Python buffers.
--
--   require('infill').setup {
--     cmd = { 'infill-lsp' },                        -- the server command (default)
--     init_options = { modelPath = '/path/to/model', steps = 32 },  -- initializationOptions
--     settings = { infill = { temperature = 0.2 } },  -- answers workspace/configuration
--     filetypes = { 'python' },                      -- buffers to attach to (default)
--   }
--
-- Fills are code actions ("Infill: fill selection", "Infill: fill statement on line N", "fix",
-- "add docstring", "fill selection (N alternatives)", and quick fixes for syntax errors): use
-- vim.lsp.buf.code_action() / range_code_action(). Only
-- APIs present in Neovim 0.7 are used (vim.lsp.start_client + vim.lsp.buf_attach_client).

local M = {}

M.client_id = nil -- the running client, started on the first Python buffer
M.config = nil -- the vim.lsp.start_client configuration setup() built

-- Lua cannot tell an empty object from an empty list: send {} as a JSON object.
local function object(value)
  if value == nil or (type(value) == 'table' and next(value) == nil) then
    return vim.empty_dict()
  end
  return value
end

local function wants(filetypes, filetype)
  for _, wanted in ipairs(filetypes) do
    if wanted == filetype then
      return true
    end
  end
  return false
end

--- Start the server (once; again if it has stopped). Returns the client id, or nil.
function M.start()
  if M.config == nil then
    error('infill: call require("infill").setup{} first')
  end
  local client = M.client_id and vim.lsp.get_client_by_id(M.client_id)
  if client and not client.is_stopped() then
    return M.client_id
  end
  M.client_id = vim.lsp.start_client(M.config)
  return M.client_id
end

--- Attach buffer `bufnr` (0: the current one) to the server, starting it if needed.
function M.attach(bufnr)
  if bufnr == nil or bufnr == 0 then
    bufnr = vim.api.nvim_get_current_buf()
  end
  local id = M.start()
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

function M.setup(opts)
  opts = opts or {}
  local init_options = object(opts.init_options)
  local settings = opts.settings or { infill = init_options }
  M.filetypes = opts.filetypes or { 'python' }
  M.config = {
    name = 'infill',
    cmd = opts.cmd or { 'infill-lsp' },
    cmd_env = opts.cmd_env,
    root_dir = opts.root_dir or vim.loop.cwd(),
    init_options = init_options,
    settings = object(settings),
    capabilities = opts.capabilities,
    handlers = opts.handlers,
    on_attach = opts.on_attach,
    on_exit = function(code, signal, client_id)
      if client_id == M.client_id then
        M.client_id = nil
      end
      if opts.on_exit then
        opts.on_exit(code, signal, client_id)
      end
    end,
  }
  local group = vim.api.nvim_create_augroup('infill_lsp', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.filetypes,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  -- Buffers already open when setup() runs.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and wants(M.filetypes, vim.bo[bufnr].filetype) then
      M.attach(bufnr)
    end
  end
  return M
end

return M
